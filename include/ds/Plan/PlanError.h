//===- PlanError.h - Errors about a plan file -------------------*- C++ -*-===//
//
// Every problem with a plan, found while reading, validating or resolving it,
// is a PlanError that says where (file, JSON path or op) and what: expected
// versus found.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_PLANERROR_H
#define DS_PLAN_PLANERROR_H

#include <stdexcept>
#include <string>

namespace ds::plan {

class PlanError : public std::runtime_error {
public:
  /// what() reads "<origin>: <where>: <detail>", leaving out empty parts.
  /// `origin` is the plan file (or another name for in-memory plans);
  /// `where` is a JSON path, e.g. "programs.eval.body[12] (aten::linear)".
  PlanError(std::string origin, std::string where, std::string detail);

  const std::string &origin() const { return origin_; }
  const std::string &where() const { return where_; }
  const std::string &detail() const { return detail_; }

private:
  std::string origin_;
  std::string where_;
  std::string detail_;
};

} // namespace ds::plan

#endif // DS_PLAN_PLANERROR_H
