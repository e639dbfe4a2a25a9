"""PipeStudio's Python helpers for training scripts (docs/debugger.md).

pipestudio.trace_ranges: PP:<action> profiler ranges for PyTorch pipeline stages and Megatron-LM,
so that a run's torch.profiler trace imports into PipeStudio's debugger.
"""
