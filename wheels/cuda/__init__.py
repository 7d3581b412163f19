"""CUDA device code in a wheel's ELF files: fat binaries read (:mod:`~wheels.cuda.fatbin`), also
as a big member streams (:mod:`~wheels.cuda.tap`); an ELF's device code
(:mod:`~wheels.cuda.devicecode`); architectures and what they run on (:mod:`~wheels.cuda.arch`);
and the audit's CUDA checks (:mod:`~wheels.cuda.audit`)."""
