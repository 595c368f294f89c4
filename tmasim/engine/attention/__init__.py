"""The attention CTA (FlashAttention-3/4 forward): its program, its processes, the 2-SM pair."""
