"""`sentune export` (the Python API's function: sentune.api.export.export): a model folder with its ONNX graphs (fp32, and int8 by ONNX Runtime's dynamic quantization),
checked against PyTorch on the user's pairs or a task before anything is written.

The graphs themselves and running them (`--backend onnx|onnx-int8`, no optimum) live in the core, since loading and
encoding use them: sentune.core.onnx_graph (export), onnx_quantize (int8), onnx_runtime (the backends), onnx_session.
Only the transformer (the first module) becomes a graph; its outputs are the token states of the last layer and of every
layer. The pooling, Normalize and any whitening or flow head stay sentence-transformers modules and run after the graph
in PyTorch on its token states, exactly as they do after the PyTorch transformer: one implementation of each head, and a
folder that `SentenceTransformer(path, backend="onnx")` also loads (it reads `onnx/model.onnx`).
"""
