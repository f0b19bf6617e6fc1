//===- ds-run.cpp - Run a plan on a data file -----------------------------===//
//
// Every failure ends as one line on stderr and exit code 1: usage errors,
// plan errors, data and weights mismatches, kernel errors (c10::Error) and
// anything else thrown below main.
//
//===----------------------------------------------------------------------===//

#include "EvalLoop.h"
#include "Options.h"
#include "TrainLoop.h"
#include "World.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

namespace {

/// One line: newlines in LibTorch messages become "; ".
std::string oneLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  std::string line;
  for (char c : text) {
    if (c == '\n')
      line += "; ";
    else
      line += c;
  }
  return line;
}

/// With several ranks the line names the rank, and the whole job ends here:
/// the other ranks would otherwise wait for this one until their timeout.
int fail(const std::string &message,
         const std::optional<ds::run::World> &world = std::nullopt) {
  std::cout.flush();
  std::string rank;
  if (world && world->size > 1)
    rank = "rank " + std::to_string(world->rank) + ": ";
  std::fprintf(stderr, "ds-run: error: %s%s\n", rank.c_str(),
               oneLine(message).c_str());
  if (world)
    world->abortIfOthersRun(1);
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  // Outside the try: an error must still reach the other ranks.
  std::optional<ds::run::World> world;
  try {
    ds::run::Options options = ds::run::parseOptions(argc, argv);
    if (options.help) {
      std::cout << ds::run::usageText();
      return 0;
    }
    world = ds::run::World::detect();
    if (options.eval)
      ds::run::runEval(options, *world);
    else
      ds::run::runTrain(options, *world);
    return 0;
  } catch (const ds::run::UsageError &error) {
    return fail(std::string(error.what()) + " (see ds-run --help)", world);
  } catch (const c10::Error &error) {
    return fail(error.what_without_backtrace(), world);
  } catch (const std::exception &error) {
    return fail(error.what(), world);
  } catch (...) {
    return fail("unknown exception", world);
  }
}
