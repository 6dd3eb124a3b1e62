#include "core/text_form.hpp"

#include <fmt/format.h>

#include "common/wire.hpp"

namespace fabric {

Result<std::vector<std::byte>> text_form_bytes(std::string_view text, std::string_view prefix) {
  const std::string_view family = prefix.substr(0, prefix.size() - 2);  // "fna" of "fna3:"
  if (text.size() >= prefix.size() && text.starts_with(family) && text[prefix.size() - 1] == ':' &&
      !text.starts_with(prefix)) {
    return Status(Errc::malformed,
                  fmt::format("unsupported version {} text form \"{}\" (this build reads \"{}\"; "
                              "it comes from an older fabric-lib: export it again)",
                              text[family.size()], text.substr(0, prefix.size()), prefix));
  }
  if (!text.starts_with(prefix)) {
    return Status(Errc::malformed, fmt::format("text form must start with \"{}\"", prefix));
  }
  auto bytes = wire::from_hex(text.substr(prefix.size()));
  if (!bytes) return Status(Errc::malformed, "text form is not valid hex");
  return std::move(bytes).value();
}

}  // namespace fabric
