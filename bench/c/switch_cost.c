/* switch_cost.c -- what a context switch costs a thread that the tracer
 * watches (bench/tracer_overhead.py runs it).  Two processes pinned to one
 * CPU hand it to each other N times with sched_yield, as ranks of an
 * oversubscribed MPI do while they wait; each process first
 *   none   does nothing more;
 *   perf   opens the perf_event_open group the tracer samples always
 *          (task-clock and context-switches, counting);
 *   rseq   points its rseq area at a critical section that never runs, and
 *          points it again after every switch, as the lazy tracer does.
 * Prints "ns_per_switch <value>" (the parent's). */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<sys/rseq.h>) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>
#define HAVE_RSEQ 1
#endif
#endif

#ifdef HAVE_RSEQ
#define STR2(x) #x
#define STR(x) STR2(x)
__asm__(".pushsection .text\n.balign 16\n"
        "switch_cost_cs_start:\n nop\n nop\n nop\n nop\n"
        ".long " STR(RSEQ_SIG) "\n"
        "switch_cost_cs_abort:\n nop\n nop\n"
        ".popsection\n");
extern char switch_cost_cs_start[] __attribute__((visibility("hidden")));
extern char switch_cost_cs_abort[] __attribute__((visibility("hidden")));
static struct rseq_cs desc;
#endif

static int perf_open(uint64_t config, int group) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = config;
  a.disabled = group == -1;
  a.exclude_hv = 1;
  a.read_format = PERF_FORMAT_GROUP;
  return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "none";
  long n = argc > 2 ? atol(argv[2]) : 200000;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) perror("sched_setaffinity");
  pid_t child = fork();
  if (strcmp(mode, "perf") == 0) {
    int fd = perf_open(PERF_COUNT_SW_TASK_CLOCK, -1);
    if (fd < 0 || perf_open(PERF_COUNT_SW_CONTEXT_SWITCHES, fd) < 0) {
      fprintf(stderr, "perf_event_open refused\n");
      return 2;
    }
    ioctl(fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
  }
  volatile uint64_t *cs = NULL;
#ifdef HAVE_RSEQ
  if (strcmp(mode, "rseq") == 0 && __rseq_size > 0) {
    desc.start_ip = (uintptr_t)switch_cost_cs_start;
    desc.post_commit_offset = 4;
    desc.abort_ip = (uintptr_t)switch_cost_cs_abort;
    cs = (volatile uint64_t *)&((struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset))->rseq_cs;
  }
#endif
  if (strcmp(mode, "rseq") == 0 && !cs) {
    fprintf(stderr, "no rseq area\n");
    return 2;
  }
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) {
#ifdef HAVE_RSEQ
    if (cs) *cs = (uintptr_t)&desc;
#endif
    sched_yield();
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (child == 0) return 0;
  waitpid(child, NULL, 0);
  /* both processes yielded n times: 2n switches in the parent's interval */
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  printf("ns_per_switch %.1f\n", ns / (2.0 * (double)n));
  return 0;
}
