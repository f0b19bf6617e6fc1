//===- TraceWriter.cpp - A Chrome trace-event file of one rank ------------===//

#include "ds/Runtime/TraceWriter.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/RuntimeError.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <set>
#include <unordered_map>

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
  ordered_json header = ordered_json::array();
  header.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  header.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"sort_index", rank_}}}});
  header.push_back(threadName(rank_, 0, "ops"));
  for (int64_t track = 0; track < tracks_; ++track)
    header.push_back(threadName(rank_, 1 + track,
                                track ? "collectives " + std::to_string(track)
                                      : std::string("collectives")));
  std::string text = "{\"traceEvents\":[";
  for (const ordered_json &event : header)
    text += event.dump() + ",\n";
  // Slices are many: each op's name, category and args are formatted once.
  std::unordered_map<const plan::Op *, std::string> opText;
  auto describe = [&](const plan::Op &op) -> const std::string & {
    std::string &entry = opText[&op];
    if (entry.empty())
      entry = "\"name\":" + ordered_json(opName(op)).dump() + ",\"cat\":\"" +
              plan::opKindName(op.kind) + "\"," +
              "\"args\":" + opArgs(op).dump();
    return entry;
  };
  std::string pid = std::to_string(rank_);
  char timing[96];
  for (const Event &event : events_) {
    int64_t tid = event.kind == Kind::Collective ? 1 + event.value : 0;
    std::snprintf(timing, sizeof(timing),
                  "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%s,"
                  "\"tid\":%lld,",
                  event.start, event.duration, pid.c_str(),
                  static_cast<long long>(tid));
    text += '{';
    text += timing;
    switch (event.kind) {
    case Kind::Step:
      text += "\"name\":\"step " + std::to_string(event.value) +
              "\",\"cat\":\"step\"";
      break;
    case Kind::Part:
      text += std::string("\"name\":\"") +
              programPartName(ProgramPart(event.value)) + "\",\"cat\":\"part\"";
      break;
    case Kind::Op:
      text += describe(*event.op);
      break;
    case Kind::Collective: {
      // The op's own text, its category replaced.
      std::string entry = describe(*event.op);
      size_t cat = entry.find(",\"cat\":\"");
      size_t end = entry.find('"', cat + 8);
      text +=
          entry.substr(0, cat) + ",\"cat\":\"collective" + entry.substr(end);
      break;
    }
    }
    text += "},\n";
  }
  ordered_json other = {
      {"producer", "ds-run"}, {"plan", plan_.producer}, {"rank", rank_}};
  // The header holds at least one event, so the list ends with ",\n".
  text.resize(text.size() - 2);
  text += "],\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + "}\n";
  try {
    plan::writeFileAtomic(path, text);
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
