"""reasonkit.recipes"""
