"""graphflat's records and models in PyTorch Geometric (``pip install graphflat[pyg]``).

- :func:`to_pyg`: a batch of records as a ``torch_geometric.data.Batch`` or ``HeteroData``;
- :class:`GCN`, :class:`SAGE`, :class:`GAT`, :class:`GINE`, :class:`RGCN`: torch modules that
  compute on such batches what GraphTrainer's models compute (:mod:`graphflat.pyg.models`);
- :func:`load_model` and :func:`save_model`: trained models in and out of model directories
  that GraphTrainer writes and GraphInfer runs (:mod:`graphflat.pyg.io`);
- :class:`LearnedRows`: a model's learned embedding table (:mod:`graphflat.pyg.learned`).
"""

from graphflat.pyg.data import to_pyg
from graphflat.pyg.io import load_model, save_model
from graphflat.pyg.learned import LearnedRows
from graphflat.pyg.models import GAT, GCN, GINE, RGCN, SAGE, GraphModel

__all__ = ["GAT", "GCN", "GINE", "RGCN", "SAGE", "GraphModel", "LearnedRows", "load_model", "save_model", "to_pyg"]
