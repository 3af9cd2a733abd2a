"""reasonkit.distill"""
