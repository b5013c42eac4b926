// A fixed pool of worker threads for work that must not run on gRPC's callback threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace devlet::dra_kubelet::internal {

class Executor {
 public:
  explicit Executor(int threads);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Submit queues `task`; false once Stop has begun (the task is not run).
  bool Submit(std::function<void()> task);
  // Stop runs what is queued, then joins the threads. Idempotent.
  void Stop();

 private:
  void Run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace devlet::dra_kubelet::internal
