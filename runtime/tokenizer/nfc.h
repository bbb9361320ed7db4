// Internal: Unicode Normalization Form C (UAX #15) over UTF-8, from build-time generated tables
// (no ICU). Input must be valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace spk::rt {

std::string nfc(std::string_view valid_utf8);

}  // namespace spk::rt
