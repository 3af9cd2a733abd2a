"""reasonkit.filters"""
