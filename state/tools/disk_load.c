// disk_load: a build-like background load on a file system, light on CPU: write a 200 KB file
// and rename it over an older one, every 5 ms, without fsync (so the kernel's writeback and the
// file system's journal carry the load), for SECONDS. Used beside fsync_probe and the kubelet
// plugin's prepare benchmark (see state/README.md, dra-kubelet/README.md).
//
//   gcc -O2 -o /tmp/disk_load state/tools/disk_load.c && /tmp/disk_load DIR SECONDS
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DIR SECONDS\n", argv[0]);
    return 2;
  }
  static char buf[200000];
  memset(buf, 'b', sizeof buf);
  const time_t end = time(NULL) + atoi(argv[2]);
  char from[512], to[512];
  int i = 0;
  while (time(NULL) < end) {
    snprintf(from, sizeof from, "%s/load-%d.tmp", argv[1], i % 500);
    snprintf(to, sizeof to, "%s/load-%d", argv[1], i % 500);
    const int fd = open(from, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
      perror(from);
      return 1;
    }
    close(fd);
    if (rename(from, to) != 0) {
      perror(to);
      return 1;
    }
    ++i;
    usleep(5000);
  }
  for (int k = 0; k < 500 && k < i; ++k) {
    snprintf(to, sizeof to, "%s/load-%d", argv[1], k);
    unlink(to);
  }
  printf("disk_load: %d files\n", i);
  return 0;
}
