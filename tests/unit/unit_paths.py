"""Where the unit tests find the project and their recorded tool output."""

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
