0func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
