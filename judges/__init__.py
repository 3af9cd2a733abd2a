"""reasonkit.judges"""
