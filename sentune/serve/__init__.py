"""`sentune serve`: an index or a model behind HTTP (FastAPI on uvicorn): search, OpenAI-style embeddings, a health
check and a search page, the model loaded once per process and concurrent requests batched into shared forward passes."""
