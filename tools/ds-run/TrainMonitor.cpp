//===- TrainMonitor.cpp - Progress, timings, monitors and trace -----------===//

#include "TrainMonitor.h"

#include "TensorBoardSink.h"

#include <cstdio>

namespace ds::run {

namespace {

/// DeepSpeed's event names for the timers (engine.py, _write_monitor).
const char *const kTimerEvents[] = {
    "Train/Samples/elapsed_time_ms_forward",
    "Train/Samples/elapsed_time_ms_backward",
    "Train/Samples/elapsed_time_ms_backward_inner",
    "Train/Samples/elapsed_time_ms_backward_allreduce",
    "Train/Samples/elapsed_time_ms_step",
};

double number(const nlohmann::ordered_json &line, const char *key,
              double fallback) {
  auto it = line.find(key);
  return it != line.end() && it->is_number() ? it->get<double>() : fallback;
}

} // namespace

TrainMonitor::TrainMonitor(const Options &options, runtime::Engine &engine,
                           const World &world, int64_t steps)
    : options_(options), engine_(engine), world_(world),
      settings_(plan::monitorOf(engine.plan(), options.planPath)),
      steps_(steps),
      trainBatchSize_(engine.plan().engines.empty()
                          ? engine.plan().microBatchPerRank * world.size *
                                engine.plan().gradientAccumulationSteps
                          : engine.plan().engines[0].batch.trainBatchSize),
      start_(Clock::now()), lastPrint_(start_) {
  for (const plan::EngineDesc &desc : engine.plan().engines)
    if (desc.precision && desc.precision->lossScaler)
      lossScaled_ = true;
  if (settings_.wallClockBreakdown) {
    timer_ = std::make_unique<runtime::PhaseTimer>();
    observers_.add(timer_.get());
  }
  if (!options.tracePath.empty()) {
    trace_ = std::make_unique<runtime::TraceWriter>(engine.plan(), world.rank);
    observers_.add(trace_.get());
  }
  if (!observers_.empty())
    engine.setObserver(&observers_);
  if (!world.isLeader())
    return;
  if (settings_.csv)
    sinks_.push_back(std::make_unique<CsvSink>(settings_.csv->directory()));
  if (settings_.tensorboard)
    sinks_.push_back(
        std::make_unique<TensorBoardSink>(settings_.tensorboard->directory()));
}

TrainMonitor::~TrainMonitor() { engine_.setObserver(nullptr); }

void TrainMonitor::stepBegin(int64_t step) {
  if (!firstStep_) {
    firstStep_ = step;
    lastPrintStep_ = step - 1;
    start_ = lastPrint_ = Clock::now();
  }
  if (trace_)
    trace_->stepBegin(step);
}

void TrainMonitor::stepEnd(int64_t step, const nlohmann::ordered_json &line) {
  if (trace_)
    trace_->stepEnd(step);
  if (!world_.isLeader())
    return;
  writeEvents(step, line);
  if (step % settings_.stepsPerPrint == 0 || step == steps_)
    printProgress(step, line);
}

void TrainMonitor::writeEvents(int64_t step,
                               const nlohmann::ordered_json &line) {
  if (sinks_.empty())
    return;
  // DeepSpeed's x axis: samples seen (global_samples).
  int64_t samples = step * trainBatchSize_;
  std::vector<std::pair<const char *, double>> events = {
      {"Train/Samples/train_loss", number(line, "loss", NAN)}};
  if (!line.contains("lr") || !line["lr"].is_null())
    events.push_back({"Train/Samples/lr", number(line, "lr", NAN)});
  if (lossScaled_)
    events.push_back(
        {"Train/Samples/loss_scale", number(line, "loss_scale", 1.0)});
  if (timer_) {
    using Timer = runtime::PhaseTimer;
    const Timer::Phase phases[] = {Timer::Forward, Timer::Backward,
                                   Timer::BackwardInner,
                                   Timer::BackwardAllReduce, Timer::Step};
    const Timer::Seconds &now = timer_->totals();
    for (size_t k = 0; k < std::size(phases); ++k)
      events.push_back({kTimerEvents[k],
                        (now[phases[k]] - eventSeconds_[phases[k]]) * 1000.0});
    eventSeconds_ = now;
  }
  for (auto &sink : sinks_) {
    for (const auto &[name, value] : events)
      sink->write(name, value, samples);
    sink->flush();
  }
}

void TrainMonitor::printProgress(int64_t step,
                                 const nlohmann::ordered_json &line) {
  Clock::time_point now = Clock::now();
  double interval = std::chrono::duration<double>(now - lastPrint_).count();
  double total = std::chrono::duration<double>(now - start_).count();
  int64_t intervalSteps = step - lastPrintStep_;
  int64_t totalSteps = step - firstStep_ + 1;
  double current =
      interval > 0 ? intervalSteps * trainBatchSize_ / interval : 0.0;
  double average = total > 0 ? totalSteps * trainBatchSize_ / total : 0.0;
  std::string lr = line.contains("lr") && !line["lr"].is_null()
                       ? pythonFloat(line["lr"].get<double>())
                       : "none";
  std::fprintf(stderr,
               "ds-run: step=%lld/%lld, loss=%s, lr=%s, "
               "RunningAvgSamplesPerSec=%.2f, CurrSamplesPerSec=%.2f\n",
               static_cast<long long>(step), static_cast<long long>(steps_),
               pythonFloat(number(line, "loss", NAN)).c_str(), lr.c_str(),
               average, current);
  if (timer_) {
    std::fprintf(stderr, "ds-run: %s\n",
                 runtime::PhaseTimer::line(timer_->totals(), printedSeconds_,
                                           intervalSteps)
                     .c_str());
    printedSeconds_ = timer_->totals();
  }
  lastPrint_ = now;
  lastPrintStep_ = step;
}

void TrainMonitor::finish() {
  if (trace_)
    trace_->write(
        runtime::TraceWriter::rankPath(options_.tracePath, world_.rank));
}

} // namespace ds::run
