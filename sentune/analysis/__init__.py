"""Figures and reports built on evaluation: layer-wise scores, t-SNE, pair tables, HTML/Markdown reports."""
