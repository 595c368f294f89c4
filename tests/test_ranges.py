"""Numbers that leave the engine's range are errors, not answers: a duration the plan derives
from other fields (a step's MMA, a copy's transfer, shared-memory time) keeps to the typed
times' rule, and the one-line error names the field it came from."""

from __future__ import annotations

import pytest

from tmasim.cli import main
from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.sweep.runner import run_sweep

RULE = "must be at most 1 s, as typed times"


@pytest.mark.parametrize(("name", "setting", "message"), [
    ("gemm-ideal", 'gpu.tensor_flops={bf16="1e30 TFLOP/s"}',
     "gpu.tensor_flops: {'bf16': '1e30 TFLOP/s'} makes a step of 4.194e+06 FLOP take 0 ps, under the engine's 1 ps"),
    ("gemm-ideal", "gpu.hbm_bandwidth=1e-10 TB/s", "gpu.hbm_bandwidth: '1e-10 TB/s' makes a 993 B copy's transfer take "
                                                   f"9.93 s: {RULE}"),
    ("gemm-ideal", "gpu.hbm_bandwidth=1e-30 TB/s", "gpu.hbm_bandwidth: '1e-30 TB/s' must be at least 1 B/s"),
    ("gemm-h100", "gpu.l2_bandwidth=1e-9 TB/s", f"gpu.l2_bandwidth: '1e-9 TB/s' makes a 16.38 kB copy's transfer take "
                                                f"16.38 s: {RULE}"),
    ("gemm-h100", "gpu.smem_bandwidth=1e-12 TB/s", "gpu.smem_bandwidth: '1e-12 TB/s' makes one step's"),
    ("gemm-h100", "gpu.clock=1e20 GHz", "gpu.clock: '1e+20 GHz' must be from 1 Hz to 1 THz"),
    ("stream-h100", "workload.compute_per_byte=1 ms", f"workload.compute_per_byte: '1 ms' makes one step's compute "
                                                      f"take 8.192 s: {RULE}"),
])
def test_derived_durations_out_of_range_are_one_line_errors_naming_the_field(capsys, name, setting, message):
    for extra in ([], ["--json"], ["--explain"]):
        assert main(["run", name, "--set", setting, *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.strip() == f"tmasim: error: {err.strip().removeprefix('tmasim: error: ')}"
        assert len(err.strip().splitlines()) == 1 and message in err, err
    with pytest.raises(ScenarioError):
        simulate(load(name, [setting]))


def test_a_sweep_records_an_out_of_range_point_as_invalid_and_writes_its_file(tmp_path):
    out = tmp_path / "s.parquet"
    frame = run_sweep("gemm-ideal", ["workload.m=1024", "workload.n=1024", "workload.k=1024"],
                      ["gpu.hbm_bandwidth=1e-30 TB/s,3 TB/s"], out=out, progress=False)
    assert frame["status"].tolist() == ["invalid", "ok"]
    assert "gpu.hbm_bandwidth" in frame["error"][0]
    again = run_sweep("gemm-ideal", ["workload.m=1024", "workload.n=1024", "workload.k=1024"],
                      ["gpu.hbm_bandwidth=1e-30 TB/s,3 TB/s"], out=out, progress=False)
    assert again.attrs["sweep"]["resumed"] == 2 and again["status"].tolist() == ["invalid", "ok"]
