"""paratrain's post-processing: HDF5 run records → Markdown/LaTeX tables and PNG plots.

records   read run records (tables, attributes, timelines) into pandas, one file or many
sections  one function per kind of benchmark: a titled table built from the records
render    Markdown, LaTeX and CSV writers for those tables
overhead  the bucketed-DDP communication-overhead model and its least-squares fit
plots     matplotlib figures (PNG)
cli       the `scripts/report` command line
"""

__all__ = ["records", "sections", "render", "overhead", "plots", "cli"]
