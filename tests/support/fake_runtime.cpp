// Stand-in for a stale `sparkctl runtime` process in tests (see sshd_harness.h: spawn_fake_runtime).
// Creates and maps $SPK_FAKE_SHM_DIR/sparkctl-<pid>-kv (1 MiB) and sleeps up to 120 s, so that a test that
// forgets to kill it cannot leave it running for long.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

int main() {
  const char* dir = std::getenv("SPK_FAKE_SHM_DIR");
  if (!dir) return 2;
  const std::string path = std::string(dir) + "/sparkctl-" + std::to_string(::getpid()) + "-kv";
  const std::string tmp = path + ".creating";
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::ftruncate(fd, 1 << 20) != 0) return 1;
  void* p = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 1;
  std::memset(p, 0x5a, 1 << 20);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return 1;  // appears only once mapped
  for (int i = 0; i < 120; ++i) ::sleep(1);
  return 0;
}
