// fsync_probe: what one durable write costs on a file system, by method (see state/README.md).
//
//   gcc -O2 -o /tmp/fsync_probe state/tools/fsync_probe.c && /tmp/fsync_probe DIR [ITERATIONS]
//
// DIR must be on the file system to measure (not /tmp if that is a tmpfs). Not built by CMake: a
// manual probe for choosing the checkpoint's write path.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int Compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void Report(const char* name, double* v, int n) {
  qsort(v, n, sizeof(double), Compare);
  printf("%-46s p50 %6.2f ms  p90 %6.2f  p99 %6.2f  max %6.2f\n", name, v[n / 2], v[n * 9 / 10],
         v[n * 99 / 100], v[n - 1]);
}

static void Check(int ok, const char* what) {
  if (!ok) {
    perror(what);
    exit(1);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [ITERATIONS]\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  const int n = argc > 2 ? atoi(argv[2]) : 200;
  static char buf[4096];
  memset(buf, 'x', sizeof buf);
  char snapshot[512], temp[512], journal[512], unwritten[512], growing[512];
  snprintf(snapshot, sizeof snapshot, "%s/probe.json", dir);
  snprintf(temp, sizeof temp, "%s/probe.json.tmp", dir);
  snprintf(journal, sizeof journal, "%s/probe.journal", dir);
  snprintf(unwritten, sizeof unwritten, "%s/probe.unwritten", dir);
  snprintf(growing, sizeof growing, "%s/probe.growing", dir);
  double* v = malloc(n * sizeof(double));
  const int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  Check(dfd >= 0, dir);

  // A 2000-byte snapshot replaced atomically.
  for (int i = 0; i < n; ++i) {
    double start = Now();
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    Check(fd >= 0 && write(fd, buf, 2000) == 2000 && fsync(fd) == 0, temp);
    close(fd);
    Check(rename(temp, snapshot) == 0 && fsync(dfd) == 0, snapshot);
    v[i] = Now() - start;
  }
  Report("rename replace (fsync file + dir)", v, n);
  for (int i = 0; i < n; ++i) {
    double start = Now();
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    Check(fd >= 0 && write(fd, buf, 2000) == 2000 && fdatasync(fd) == 0, temp);
    close(fd);
    Check(rename(temp, snapshot) == 0, snapshot);
    v[i] = Now() - start;
  }
  Report("rename replace (fdatasync file, no dir fsync)", v, n);

  // 600-byte records into a 16 MiB file that is allocated and written (zeros... here 'x').
  int fd = open(journal, O_RDWR | O_CREAT | O_TRUNC, 0600);
  Check(fd >= 0 && fallocate(fd, 0, 0, 16 << 20) == 0, journal);
  for (int i = 0; i < 4096; ++i) Check(write(fd, buf, 4096) == 4096, journal);
  Check(fsync(fd) == 0, journal);
  for (int i = 0; i < n; ++i) {
    double start = Now();
    Check(pwrite(fd, buf, 600, (off_t)i * 600) == 600 && fdatasync(fd) == 0, journal);
    v[i] = Now() - start;
  }
  Report("overwrite, preallocated + written, fdatasync", v, n);

  int fd2 = open(unwritten, O_RDWR | O_CREAT | O_TRUNC, 0600);
  Check(fd2 >= 0 && fallocate(fd2, 0, 0, 16 << 20) == 0 && fsync(fd2) == 0, unwritten);
  for (int i = 0; i < n; ++i) {
    double start = Now();
    Check(pwrite(fd2, buf, 600, (off_t)i * 600) == 600 && fdatasync(fd2) == 0, unwritten);
    v[i] = Now() - start;
  }
  Report("write into fallocate'd blocks, fdatasync", v, n);

  int fd3 = open(growing, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
  Check(fd3 >= 0, growing);
  for (int i = 0; i < n; ++i) {
    double start = Now();
    Check(write(fd3, buf, 600) == 600 && fdatasync(fd3) == 0, growing);
    v[i] = Now() - start;
  }
  Report("append to a growing file, fdatasync", v, n);

  int fd4 = open(journal, O_RDWR | O_DSYNC);
  Check(fd4 >= 0, journal);
  for (int i = 0; i < n; ++i) {
    double start = Now();
    Check(pwrite(fd4, buf, 600, (off_t)i * 600) == 600, journal);
    v[i] = Now() - start;
  }
  Report("O_DSYNC overwrite, preallocated + written", v, n);

  close(fd);
  close(fd2);
  close(fd3);
  close(fd4);
  unlink(snapshot);
  unlink(journal);
  unlink(unwritten);
  unlink(growing);
  return 0;
}
