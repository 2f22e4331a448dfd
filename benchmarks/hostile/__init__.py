"""The hostile-inputs sweep, an area a module; benchmarks/hostile_inputs.py runs it."""
