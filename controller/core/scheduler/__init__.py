"""The admission cycle (Kueue's `pkg/scheduler`): heads, flavor assignment, partial
admission, the order of admission and the decisions it returns."""
