# Starts `nproc` ranks of a command with PyTorch's own elastic agent, the launcher behind
# torchrun (torch.distributed.launcher.api.elastic_launch), on the static rendezvous that
# `torchrun --master-addr/--master-port` uses: the agent hosts the TCPStore on the port and
# tells its workers so with TORCHELASTIC_USE_AGENT_STORE=True.
# usage: python3 elastic_launch.py PORT NPROC COMMAND ARGS...
# (torchrun's own command line is not used: Debian's 1.13 torchrun fails on Python 3.11
# before it starts a worker, in its --redirects parsing.)
import sys
import uuid

from torch.distributed.elastic.multiprocessing import Std
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

port, nproc, command, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
options = dict(
    min_nodes=1,
    max_nodes=1,
    nproc_per_node=nproc,
    run_id=str(uuid.uuid4()),
    rdzv_backend="static",
    rdzv_endpoint=f"127.0.0.1:{port}",
    rdzv_configs={"rank": 0},
    max_restarts=0,
    monitor_interval=0.2,
    start_method="spawn",
)
# Workers' output straight to ours: `redirects`/`tee` up to PyTorch 2.2, the default of
# `logs_specs` since.
fields = getattr(LaunchConfig, "__dataclass_fields__", {})
if "redirects" in fields:
    options.update(redirects=Std.NONE, tee=Std.NONE)
config = LaunchConfig(**options)
try:
    elastic_launch(config, command)(*args)
except Exception as e:  # ChildFailedError: a rank failed; its own stderr said why
    print(f"elastic_launch: {type(e).__name__}", file=sys.stderr)
    sys.exit(1)
