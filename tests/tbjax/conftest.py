from tbjax.assets.tiny import TINY_ARCHITECTURES

ALL_ARCHS = sorted(TINY_ARCHITECTURES)
