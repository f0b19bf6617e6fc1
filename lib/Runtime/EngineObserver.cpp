//===- EngineObserver.cpp - Observing an engine's programs ----------------===//

#include "ds/Runtime/Engine.h"

namespace ds::runtime {

void Engine::setObserver(ExecutionObserver *observer) {
  for (ShapePrograms &shape : shapes_)
    for (Executor *executor : {shape.eval.get(), shape.train.get()})
      if (executor)
        executor->setObserver(observer);
  if (step_)
    step_->setObserver(observer);
}

} // namespace ds::runtime
