"""Writes OUT (a .pt path): the scripted twin of the traced_mlp test model, the same TracedMLP
with the same weights (make_models.build_traced_mlp's seed 8), made with torch.jit.script."""
import os
import sys
import warnings

warnings.filterwarnings("ignore", category=FutureWarning)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import torch  # noqa: E402
import make_models  # noqa: E402

# As make_models.py run as a script names it (`__torch__.TracedMLP`).
make_models.TracedMLP.__module__ = "__main__"
torch.manual_seed(8)
torch.jit.script(make_models.TracedMLP()).save(sys.argv[1])
