// Enums of the mc dialect.
#ifndef MC_ENUMS_TD
#define MC_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def MC_CmpEQ : I32EnumAttrCase<"EQ", 0>;
def MC_CmpNE : I32EnumAttrCase<"NE", 1>;
def MC_CmpLT : I32EnumAttrCase<"LT", 2>;
def MC_CmpLE : I32EnumAttrCase<"LE", 3>;
def MC_CmpGT : I32EnumAttrCase<"GT", 4>;
def MC_CmpGE : I32EnumAttrCase<"GE", 5>;

def MC_ComparisonDirection : I32EnumAttr<"ComparisonDirection",
    "comparison direction",
    [MC_CmpEQ, MC_CmpNE, MC_CmpLT, MC_CmpLE, MC_CmpGT, MC_CmpGE]> {
  let cppNamespace = "::mc";
}

#endif // MC_ENUMS_TD
