"""Profiler ranges per pipeline action, so that PipeStudio can read a run's torch.profiler trace.

PyTorch's pipelining runtime (``_PipelineScheduleRuntime`` and every schedule class built on it:
Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV, CSV-loaded
schedules) wraps each action in ``record_function("PP:<action>")``, and PipeStudio imports those
ranges. ``ScheduleGPipe`` names its ranges ``Forward i`` / ``Backward i`` (PipeStudio reads them
too), but ``Schedule1F1B`` -- torchtitan's default -- records none, and Megatron-LM's ranges cover
whole phases, not micro-batches. This module adds the same ``PP:<action>`` ranges from the other
side, around the stage's own work:

    import pipestudio.trace_ranges as trace_ranges
    trace_ranges.enable()            # every PipelineStage of this process, any schedule

- ``PP:<stage>F<mb>`` around ``forward_one_chunk``, ``PP:<stage>B<mb>`` (or ``I`` for a backward
  of the inputs only) around ``backward_one_chunk``, ``PP:<stage>W<mb>`` around
  ``backward_weight_one_chunk``, ``PP:<stage>REDUCE_GRAD`` around ``perform_reduce_grad``;
- for Megatron-LM, ``enable_megatron()`` wraps ``forward_step`` and ``backward_step`` of
  ``megatron.core.pipeline_parallel.schedules``: ``PP:<stage>F<mb>`` and ``PP:<stage>B<mb>``,
  the stage being the pipeline rank plus the virtual stage times the pipeline size (Megatron's
  interleaved placement) and a backward's micro-batch that of the forward whose output it takes.

Under a runtime class that already records these ranges the stage's range nests inside the
runtime's one of the same name; PipeStudio reads the two as one. The ranges cost one
``record_function`` per action while a profiler runs and nothing otherwise.

The module needs only torch (2.x) and, for ``enable_megatron``, Megatron-LM itself. It is
installed with PipeStudio under ``<prefix>/share/pipestudio/python`` (add that folder to
PYTHONPATH) and may as well be copied next to a training script.
"""

import functools
import inspect
import threading
import weakref

__all__ = ["enable", "disable", "enabled", "enable_megatron", "disable_megatron", "action_name"]

_lock = threading.Lock()
_stage_originals = {}  # (class, method name) -> the original function
_megatron_originals = {}  # (module, name) -> the original function


def action_name(stage, kind, microbatch=None):
    """The range name PyTorch's runtime gives an action: ``PP:0F1``, ``PP:2I0``, ``PP:1REDUCE_GRAD``."""
    return f"PP:{stage}{kind}" + ("" if microbatch is None else str(microbatch))


def _profiling():
    from torch.autograd import profiler

    # A private flag that torch 2.x sets while a profiler records; if a version lacks it,
    # always record (record_function is cheap when nothing listens).
    return getattr(profiler, "_is_profiler_enabled", True)


def _ranged(fn, name_of):
    """fn wrapped in record_function(name_of(self, *args, **kwargs)) while a profiler runs."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if not _profiling():
            return fn(self, *args, **kwargs)
        from torch.autograd.profiler import record_function

        with record_function(name_of(self, *args, **kwargs)):
            return fn(self, *args, **kwargs)

    wrapper.__pipestudio_original__ = fn
    return wrapper


def _param(fn, name, default=None):
    """A reader of parameter `name` of a call fn(self, *args, **kwargs), its position looked up
    once."""
    params = inspect.signature(fn).parameters
    names = list(params)[1:]  # without self
    pos = names.index(name) if name in names else None
    p = params.get(name)
    if p is not None and p.default is not inspect.Parameter.empty:
        default = p.default

    def read(args, kwargs):
        if name in kwargs:
            return kwargs[name]
        if pos is not None and pos < len(args):
            return args[pos]
        return default

    return read


def _stage_wrappers():
    def fwd(orig):
        mb = _param(orig, "fwd_chunk_id")
        return _ranged(orig, lambda s, *a, **k: action_name(s.stage_index, "F", mb(a, k)))

    def bwd(orig):
        mb = _param(orig, "bwd_chunk_id")
        full = _param(orig, "full_backward", True)
        return _ranged(orig, lambda s, *a, **k: action_name(s.stage_index, "B" if full(a, k) else "I", mb(a, k)))

    def wgt(orig):
        mb = _param(orig, "bwd_chunk_id")
        return _ranged(orig, lambda s, *a, **k: action_name(s.stage_index, "W", mb(a, k)))

    def reduce_grad(orig):
        return _ranged(orig, lambda s, *a, **k: action_name(s.stage_index, "REDUCE_GRAD"))

    return {
        "forward_one_chunk": fwd,
        "backward_one_chunk": bwd,
        "backward_weight_one_chunk": wgt,
        "perform_reduce_grad": reduce_grad,
    }


def enable(stage_class=None):
    """Adds PP:<action> ranges to every pipeline stage (torch.distributed.pipelining's
    _PipelineStageBase, or `stage_class`). Idempotent; `disable()` undoes it."""
    if stage_class is None:
        from torch.distributed.pipelining.stage import _PipelineStageBase as stage_class
    with _lock:
        for method, wrap in _stage_wrappers().items():
            orig = stage_class.__dict__.get(method)
            if orig is None or (stage_class, method) in _stage_originals:
                continue  # an older torch without the method, or already wrapped
            _stage_originals[(stage_class, method)] = orig
            setattr(stage_class, method, wrap(orig))


def disable():
    """Removes the ranges `enable()` added."""
    with _lock:
        for (cls, method), orig in _stage_originals.items():
            setattr(cls, method, orig)
        _stage_originals.clear()


def enabled():
    return bool(_stage_originals) or bool(_megatron_originals)


# --- Megatron-LM --------------------------------------------------------------------------------


class _MegatronActions:
    """Stage and micro-batch of Megatron's forward and backward steps. A backward step is told
    its micro-batch by the output tensor it takes back: the forward step's own output object
    (Megatron keeps it in its output_tensors queue, its storage freed in place)."""

    def __init__(self, pp_rank, pp_size, forward_sig, backward_sig):
        self.pp_rank = pp_rank
        self.pp_size = pp_size
        self.forward_sig = forward_sig
        self.backward_sig = backward_sig
        self.by_output = {}  # id(output) -> (weakref, stage, microbatch)
        self.counts = {}  # stage -> forwards seen (when Megatron passes no current_microbatch)

    @staticmethod
    def _first(t):
        while isinstance(t, (list, tuple)) and t:
            t = t[0]
        return t

    def forward(self, args, kwargs):
        bound = self.forward_sig.bind_partial(*args, **kwargs).arguments
        vp = bound.get("vp_stage") or 0
        stage = self.pp_rank() + vp * self.pp_size()
        mb = bound.get("current_microbatch")
        if mb is None:
            n = bound.get("num_microbatches") or 0
            mb = self.counts.get(stage, 0)
            self.counts[stage] = (mb + 1) % n if n else mb + 1
        return stage, mb

    def remember(self, result, stage, mb):
        out = self._first(result[0] if isinstance(result, tuple) else result)
        if out is None:
            return
        key = id(out)
        try:
            ref = weakref.ref(out, lambda _r, k=key: self.by_output.pop(k, None))
        except TypeError:
            return
        self.by_output[key] = (ref, stage, mb)

    def backward(self, args, kwargs):
        bound = self.backward_sig.bind_partial(*args, **kwargs).arguments
        out = self._first(bound.get("output_tensor"))
        entry = self.by_output.pop(id(out), None) if out is not None else None
        if entry is None or entry[0]() is not out:
            return None
        return entry[1], entry[2]


def enable_megatron(schedules=None, pp_rank=None, pp_size=None):
    """Adds PP:<stage>F<mb> / PP:<stage>B<mb> ranges around Megatron-LM's forward_step and
    backward_step (megatron.core.pipeline_parallel.schedules, or the module given). The pipeline
    rank and size come from megatron.core.parallel_state unless given as functions. Megatron's
    combined 1F1B path for expert-parallel overlap (overlap_moe_expert_parallel_comm) runs its
    own step functions and gets no ranges."""
    if schedules is None:
        from megatron.core.pipeline_parallel import schedules
    if pp_rank is None or pp_size is None:
        from megatron.core import parallel_state

        pp_rank = pp_rank or parallel_state.get_pipeline_model_parallel_rank
        pp_size = pp_size or parallel_state.get_pipeline_model_parallel_world_size
    with _lock:
        if (schedules, "forward_step") in _megatron_originals:
            return
        fwd, bwd = schedules.forward_step, schedules.backward_step
        acts = _MegatronActions(pp_rank, pp_size, inspect.signature(fwd), inspect.signature(bwd))

        @functools.wraps(fwd)
        def forward_step(*args, **kwargs):
            if not _profiling():
                return fwd(*args, **kwargs)
            from torch.autograd.profiler import record_function

            stage, mb = acts.forward(args, kwargs)
            with record_function(action_name(stage, "F", mb)):
                result = fwd(*args, **kwargs)
            acts.remember(result, stage, mb)
            return result

        @functools.wraps(bwd)
        def backward_step(*args, **kwargs):
            found = acts.backward(args, kwargs) if _profiling() else None
            if found is None:
                return bwd(*args, **kwargs)
            from torch.autograd.profiler import record_function

            with record_function(action_name(found[0], "B", found[1])):
                return bwd(*args, **kwargs)

        _megatron_originals[(schedules, "forward_step")] = fwd
        _megatron_originals[(schedules, "backward_step")] = bwd
        # The schedules look both up as module globals at each call.
        schedules.forward_step = forward_step
        schedules.backward_step = backward_step


def disable_megatron():
    """Removes the ranges `enable_megatron()` added."""
    with _lock:
        for (module, name), orig in _megatron_originals.items():
            setattr(module, name, orig)
        _megatron_originals.clear()
