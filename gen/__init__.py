"""reasonkit.gen"""
