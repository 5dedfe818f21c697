"""Data sets: the paper's synthetic denoising images and real structured data (OCR letters)."""
from slr.datasets.denoising import make_denoising
from slr.datasets.letters import load_letters

__all__ = ["load_letters", "make_denoising"]
