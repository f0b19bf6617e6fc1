//===- EngineObserver.cpp - Observing an engine's programs ----------------===//

#include "ds/Runtime/Engine.h"

namespace ds::runtime {

void Engine::setObserver(ExecutionObserver *observer) {
  for (Executor *executor : {eval_.get(), train_.get(), step_.get()})
    if (executor)
      executor->setObserver(observer);
}

} // namespace ds::runtime
