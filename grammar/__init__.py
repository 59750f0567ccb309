"""The Lark grammar of the flow language, shipped as package data."""
