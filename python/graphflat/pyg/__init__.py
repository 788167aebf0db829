"""graphflat's records and models in PyTorch Geometric (``pip install graphflat[pyg]``)."""

from graphflat.pyg.data import to_pyg

__all__ = ["to_pyg"]
