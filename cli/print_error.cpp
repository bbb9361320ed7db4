// The one error line every verb prints: "sparkctl <verb>: <message> (<fix>)" on stderr.
#include <iostream>

#include "cli/context.h"

namespace spk::cli {

void print_error(const std::string& verb, const std::string& what) {
  std::cerr << "sparkctl " << verb << ": " << what << "\n";
}

}  // namespace spk::cli
