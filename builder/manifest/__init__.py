"""The manifest: stack.yaml and the recipes, validated into a frozen model (:mod:`.model`).

:mod:`.schema` reads YAML with its marks and collects every problem as ``FILE:LINE:COL``;
:mod:`.loader` turns a stack.yaml and its recipes into a :class:`~.model.Stack`.
"""
