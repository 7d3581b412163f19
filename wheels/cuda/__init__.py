"""CUDA device code in a wheel's ELF files: fat binaries read (:mod:`~wheels.cuda.fatbin`), also
as a big member streams (:mod:`~wheels.cuda.tap`); an ELF's device code
(:mod:`~wheels.cuda.devicecode`); architectures and what they run on (:mod:`~wheels.cuda.arch`);
and the audit's CUDA checks (:mod:`~wheels.cuda.audit`).

The names of the sections that hold fat binaries are here, so that a reader can tell whether an
ELF file has device code without loading the modules that read it."""

FATBIN_SECTION = ".nv_fatbin"
RELFATBIN_SECTION = "__nv_relfatbin"
FATBIN_SECTIONS = (FATBIN_SECTION, RELFATBIN_SECTION)
