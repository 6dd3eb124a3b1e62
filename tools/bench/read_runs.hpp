#pragma once
// The READ rows' timed rounds: this side reads the target's buffer (registered readable) into
// its own, `window` requests deep, the clock stopping at the last local completion: a READ's
// completion means its bytes are here. Page i of a paged read takes the target's page
// dst_page_order(pages)[i] into local page i.

#include "runs.hpp"

namespace bench {

Figures engine_reads(Side& s, const Peer& peer, const WriteRound& r);
// The raw loop: fi_read straight to the endpoint. The target polls its endpoint meanwhile
// (tcp moves data only inside its CQ reads) until a closing zero-byte write with kDataImm.
Figures raw_reads(Side& s, const Peer& peer, Link& link, const WriteRound& r);

}  // namespace bench
