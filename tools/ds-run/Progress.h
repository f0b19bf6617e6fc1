//===- Progress.h - Occasional progress lines on stderr ---------*- C++ -*-===//

#ifndef DS_TOOLS_DSRUN_PROGRESS_H
#define DS_TOOLS_DSRUN_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace ds::run {

/// Prints "ds-run: <what> step 3/100, 12.3 s" to stderr at most every
/// `interval`, so that long runs show life without flooding the log.
class Progress {
public:
  explicit Progress(const char *what,
                    std::chrono::seconds interval = std::chrono::seconds(5))
      : what_(what), interval_(interval), start_(Clock::now()), last_(start_) {}

  void update(int64_t step, int64_t steps) {
    Clock::time_point now = Clock::now();
    if (now - last_ < interval_)
      return;
    last_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "ds-run: %s step %lld/%lld, %.1f s\n", what_,
                 static_cast<long long>(step), static_cast<long long>(steps),
                 elapsed);
  }

private:
  using Clock = std::chrono::steady_clock;
  const char *what_;
  Clock::duration interval_;
  Clock::time_point start_;
  Clock::time_point last_;
};

} // namespace ds::run

#endif // DS_TOOLS_DSRUN_PROGRESS_H
