"""Test environment only (.venv-trainers, made by scripts/bootstrap.sh): Debian's
torch 1.13 predates Python 3.11, whose dataclasses refuse an unhashable default
(bpo-44674), so `torch.distributed._shard` -- and with it `import lightning` --
fails. This backports torch's own fix (pytorch/pytorch#91795, in torch 2.0:
`field(default_factory=TensorProperties)`) as the module is loaded. It changes
nothing else and nothing in gputriage; a .pth file in the environment imports it
(as gputriage_torch_py311_backport)."""
import importlib.abc
import importlib.util
import sys

_MODULE = "torch.distributed._shard.sharded_tensor.metadata"
_OLD = "field(default=TensorProperties())"
_NEW = "field(default_factory=TensorProperties)"


class _Backport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or not spec.origin:
            return spec
        self.origin = spec.origin
        spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(self.origin, encoding="utf-8") as f:
            source = f.read()
        exec(compile(source.replace(_OLD, _NEW), self.origin, "exec"), module.__dict__)


if sys.version_info >= (3, 11):
    sys.meta_path.insert(0, _Backport())
