//===- TraceWriter.cpp - A Chrome trace-event file of one rank ------------===//

#include "ds/Runtime/TraceWriter.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/RuntimeError.h"

#include <nlohmann/json.hpp>

#include <set>

namespace ds::runtime {

using ordered_json = nlohmann::ordered_json;

TraceWriter::TraceWriter(const plan::Plan &plan, int64_t rank)
    : plan_(plan), rank_(rank), origin_(Clock::now()) {}

double TraceWriter::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void TraceWriter::open(Kind kind, const plan::Op *op, int64_t value) {
  stack_.push_back({kind, op, value, Clock::now()});
}

void TraceWriter::close() {
  if (stack_.empty())
    return;
  Clock::time_point end = Clock::now();
  const Open &top = stack_.back();
  events_.push_back({top.kind, top.op, top.value, micros(top.start),
                     micros(end) - micros(top.start)});
  stack_.pop_back();
}

void TraceWriter::stepBegin(int64_t step) { open(Kind::Step, nullptr, step); }
void TraceWriter::stepEnd(int64_t) { close(); }

void TraceWriter::partBegin(ProgramPart part) {
  program_ = part == ProgramPart::Forward || part == ProgramPart::Backward ? 0
             : part == ProgramPart::Step                                   ? 1
                                                                           : 2;
  open(Kind::Part, nullptr, int64_t(part));
}

void TraceWriter::partEnd(ProgramPart) { close(); }

void TraceWriter::opBegin(const plan::Op &op) { open(Kind::Op, &op, 0); }

int64_t TraceWriter::freeTrack() const {
  std::set<int64_t> used;
  for (const auto &entry : inFlight_)
    used.insert(entry.second.track);
  int64_t track = 0;
  while (used.count(track))
    ++track;
  return track;
}

void TraceWriter::opEnd(const plan::Op &op) {
  Clock::time_point start = stack_.empty() ? Clock::now() : stack_.back().start;
  close();
  if (plan::isCollective(op.kind) && !op.results.empty()) {
    int64_t track = freeTrack();
    tracks_ = std::max(tracks_, track + 1);
    inFlight_[{program_, op.results[0]}] = {&op, start, track};
  } else if (op.kind == plan::OpKind::Wait) {
    auto it = inFlight_.find({program_, op.arg});
    if (it == inFlight_.end())
      return;
    const InFlight &flight = it->second;
    double begin = micros(flight.start);
    events_.push_back({Kind::Collective, flight.op, flight.track, begin,
                       micros(Clock::now()) - begin});
    inFlight_.erase(it);
  }
}

namespace {

ordered_json opArgs(const plan::Op &op) {
  ordered_json args = ordered_json::object();
  args["op"] = op.label();
  if (!op.module.empty())
    args["module"] = op.module;
  if (!op.moduleClass.empty())
    args["class"] = op.moduleClass;
  if (!op.loc.empty())
    args["loc"] = op.loc;
  if (!op.engine.empty())
    args["engine"] = op.engine;
  if (op.bucket >= 0)
    args["bucket"] = op.bucket;
  return args;
}

/// An op's slice name: its module path, else what it is ("wait",
/// "all_reduce", "aten::add.Tensor" at the top level).
std::string opName(const plan::Op &op) {
  if (!op.module.empty())
    return op.module;
  if (!op.engine.empty() && op.kind != plan::OpKind::Call)
    return op.label() + " " + op.engine;
  return op.label();
}

ordered_json threadName(int64_t pid, int64_t tid, const std::string &name) {
  return {{"name", "thread_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", tid},
          {"args", {{"name", name}}}};
}

} // namespace

void TraceWriter::write(const std::string &path) const {
  ordered_json events = ordered_json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"sort_index", rank_}}}});
  events.push_back(threadName(rank_, 0, "ops"));
  for (int64_t track = 0; track < tracks_; ++track)
    events.push_back(threadName(rank_, 1 + track,
                                track ? "collectives " + std::to_string(track)
                                      : std::string("collectives")));
  for (const Event &event : events_) {
    ordered_json entry;
    int64_t tid = 0;
    switch (event.kind) {
    case Kind::Step:
      entry["name"] = "step " + std::to_string(event.value);
      entry["cat"] = "step";
      break;
    case Kind::Part:
      entry["name"] = programPartName(ProgramPart(event.value));
      entry["cat"] = "part";
      break;
    case Kind::Op:
      entry["name"] = opName(*event.op);
      entry["cat"] = plan::opKindName(event.op->kind);
      break;
    case Kind::Collective:
      entry["name"] = opName(*event.op);
      entry["cat"] = "collective";
      tid = 1 + event.value;
      break;
    }
    entry["ph"] = "X";
    entry["ts"] = event.start;
    entry["dur"] = event.duration;
    entry["pid"] = rank_;
    entry["tid"] = tid;
    if (event.op)
      entry["args"] = opArgs(*event.op);
    events.push_back(std::move(entry));
  }
  ordered_json document = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"producer", "ds-run"}, {"plan", plan_.producer}, {"rank", rank_}}}};
  try {
    plan::writeFileAtomic(path, document.dump() + "\n");
  } catch (const std::exception &error) {
    throw RuntimeError("--trace " + path + ": " + error.what());
  }
}

std::string TraceWriter::rankPath(const std::string &path, int64_t rank) {
  std::string suffix = ".rank" + std::to_string(rank) + ".json";
  const std::string json = ".json";
  if (path.size() >= json.size() &&
      path.compare(path.size() - json.size(), json.size(), json) == 0)
    return path.substr(0, path.size() - json.size()) + suffix;
  return path + suffix;
}

} // namespace ds::runtime
