defmodule Grove.SpawnOptions do
  @moduledoc false
  # The options a long-lived process of the world or of the actors may be
  # started with (`:erlang.spawn_opt/2`'s), validated once where they are
  # configured: how big its heap starts and how often its collector sweeps
  # the old heap, and whether its messages queue on or off its heap.

  @type t :: [
          min_heap_size: non_neg_integer(),
          min_bin_vheap_size: non_neg_integer(),
          fullsweep_after: non_neg_integer(),
          message_queue_data: :on_heap | :off_heap
        ]

  @sizes [:min_heap_size, :min_bin_vheap_size, :fullsweep_after]

  @doc "Returns `opts` if every one is a known spawn option; raises `ArgumentError` naming `key`."
  @spec validate!(atom(), term()) :: t()
  def validate!(key, opts) do
    unless is_list(opts) and Enum.all?(opts, &valid?/1) do
      raise ArgumentError,
            "#{inspect(key)} must be a keyword list of :min_heap_size, :min_bin_vheap_size, " <>
              ":fullsweep_after (non-negative integers) and :message_queue_data " <>
              "(:on_heap or :off_heap), got: #{inspect(opts)}"
    end

    opts
  end

  defp valid?({key, n}) when key in @sizes, do: is_integer(n) and n >= 0
  defp valid?({:message_queue_data, how}), do: how in [:on_heap, :off_heap]
  defp valid?(_other), do: false
end
