//===- ExecutionObserver.cpp - Watching an executor run -------------------===//

#include "ds/Runtime/ExecutionObserver.h"

namespace ds::runtime {

const char *programPartName(ProgramPart part) {
  switch (part) {
  case ProgramPart::Forward:
    return "forward";
  case ProgramPart::Backward:
    return "backward";
  case ProgramPart::Step:
    return "step";
  case ProgramPart::Eval:
    return "eval";
  }
  return "?";
}

ExecutionObserver::~ExecutionObserver() = default;

void ObserverList::partBegin(ProgramPart part) {
  for (ExecutionObserver *observer : observers_)
    observer->partBegin(part);
}

void ObserverList::partEnd(ProgramPart part) {
  for (ExecutionObserver *observer : observers_)
    observer->partEnd(part);
}

void ObserverList::opBegin(const plan::Op &op) {
  for (ExecutionObserver *observer : observers_)
    observer->opBegin(op);
}

void ObserverList::opEnd(const plan::Op &op) {
  for (ExecutionObserver *observer : observers_)
    observer->opEnd(op);
}

} // namespace ds::runtime
