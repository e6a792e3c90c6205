"""What every PyTorch framework shares: how ranks find each other, the models, their input, the collectives sweep,
provenance and the settings they have in common. Not a framework itself (its name starts with an underscore, so the
frameworks' registry passes it by); importing it imports no torch."""
