"""Data sets: the paper's synthetic denoising images and real structured data (OCR letters, snakes)."""
from slr.datasets.denoising import make_denoising
from slr.datasets.letters import load_letters
from slr.datasets.snakes import load_snakes

__all__ = ["load_letters", "load_snakes", "make_denoising"]
