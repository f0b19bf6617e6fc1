"""Checks a predicted report against a measured one for a model with dynamic shapes.

  check_bound_report.py PLAN PREDICTED.json MEASURED.json

The plan must give every dynamic tensor value a "bound"; the prediction must mark its activation
peak as resting on them (activation_peak_is_bound, no unbounded values) and hold the measured
activation and overall peaks: measured <= predicted on every rank. Prints both peaks.
"""

import json
import sys


def values(program):
    return program["values"]


def main():
    plan_path, predicted_path, measured_path = sys.argv[1:4]
    with open(plan_path) as f:
        plan = json.load(f)
    with open(predicted_path) as f:
        predicted = json.load(f)
    with open(measured_path) as f:
        measured = json.load(f)
    failures = []
    dynamic = bounded = 0
    for name, program in plan["programs"].items():
        for value in values(program):
            if -1 in value.get("shape", []):
                dynamic += 1
                bounded += "bound" in value
    if dynamic == 0 or bounded != dynamic:
        failures.append("%d of %d dynamic values have a bound" % (bounded, dynamic))
    for p, m in zip(predicted["ranks"], measured["ranks"]):
        if p.get("activation_peak_is_bound") is not True:
            failures.append("rank %d: activation_peak_is_bound is %s"
                            % (p["rank"], p.get("activation_peak_is_bound")))
        if p.get("unbounded_values") != 0:
            failures.append("rank %d: %s unbounded values" % (p["rank"], p.get("unbounded_values")))
        if "activation_peak_is_bound" in m:
            failures.append("rank %d: the measured report marks a bound" % m["rank"])
        for key in ("activation_peak_bytes", "peak_bytes"):
            if m[key] > p[key]:
                failures.append("rank %d: measured %s %d > predicted %d"
                                % (m["rank"], key, m[key], p[key]))
        print("rank %d: %d dynamic values bounded; activation peak measured %d <= predicted %d; "
              "peak measured %d <= predicted %d"
              % (m["rank"], bounded, m["activation_peak_bytes"], p["activation_peak_bytes"],
                 m["peak_bytes"], p["peak_bytes"]))
    if len(predicted["ranks"]) != len(measured["ranks"]):
        failures.append("rank counts differ")
    for failure in failures:
        print("FAIL: " + failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
