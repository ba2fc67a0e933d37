"""Where the Method protocol and the registry used to be; they are the engine's now
(``memearena.engine.protocol``, ``memearena.engine.registry``). Kept for older imports."""

from memearena.engine.protocol import Finished, Inputs, Method, MethodRun, RunContext
from memearena.engine.registry import get_method, method_names

__all__ = ["Finished", "Inputs", "Method", "MethodRun", "RunContext", "get_method", "method_names"]
