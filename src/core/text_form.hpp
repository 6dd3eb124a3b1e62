#pragma once
// The text forms of NetAddr and MrDesc: a prefix naming the type and version ("fna3:",
// "fmd3:") followed by the lowercase hex of the encoding.

#include <cstddef>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"

namespace fabric {

// The bytes behind `text` of the form `prefix` + hex. Errc::malformed otherwise, with a message
// for the caller to put its type in front of; the prefix of an older version of the same type
// (same three letters, another digit) is named as an unsupported version.
Result<std::vector<std::byte>> text_form_bytes(std::string_view text, std::string_view prefix);

}  // namespace fabric
