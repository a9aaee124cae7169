Feature: Intent Protocol v2.1 (seed 004)
